import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.jgroups.Channel;
import org.jgroups.JChannel;
import org.jgroups.Message;
import org.jgroups.ReceiverAdapter;
import org.jgroups.conf.ConfiguratorFactory;
import org.jgroups.conf.ProtocolConfiguration;
import org.jgroups.conf.ProtocolStackConfigurator;

/**
 * The JGroups side of QuickSilver's comparison, in the MPerf pattern: one sender and N receivers, each a process
 * with G channels (one cluster per group, over one shared UDP transport); the sender sends W warm-up messages and then
 * M measured messages of S bytes round robin over its channels (the first byte says which: 2 warm-up, 0 measured);
 * receivers count both across all channels, time from the first measured message to the last message, tell the sender
 * when they have all W+M, and print one line: RESULT role=... key=value ... Every wait is bounded by timeout=seconds.
 * The same protocol as the C# roles of QuickSilver.Compare (ArrivalCounter).
 *
 * Usage: java -Djava.net.preferIPv4Stack=true -Djgroups.bind_addr=127.0.0.1 -cp build:jgroups.jar QsPerf
 *        role=sender|receiver receivers=N warmup=W messages=M size=S groups=G timeout=SECONDS cluster=NAME port=MCAST_PORT
 */
public final class QsPerf {
    private static final byte DATA = 0;
    private static final byte DONE = 1;
    private static final byte WARMUP = 2;

    private final Map<String, String> args;
    private final boolean sender;
    private final int receivers;
    private final long messages;
    private final long warmup;
    private final int size;
    private final int groups;
    private final long deadlineNanos;
    private final AtomicLong received = new AtomicLong();
    private final AtomicLong measured = new AtomicLong();
    private final AtomicLong done = new AtomicLong();
    private volatile long firstMeasuredMicros;
    private volatile long lastMicros;
    private final List<JChannel> channels = new ArrayList<>();

    private QsPerf(Map<String, String> args) {
        this.args = args;
        sender = "sender".equals(get("role", "receiver"));
        receivers = Integer.parseInt(get("receivers", "1"));
        messages = Long.parseLong(get("messages", "1000"));
        warmup = Math.max(0, Long.parseLong(get("warmup", "0")));
        size = Math.max(1, Integer.parseInt(get("size", "100")));
        groups = Math.max(1, Integer.parseInt(get("groups", "1")));
        deadlineNanos = System.nanoTime() + TimeUnit.SECONDS.toNanos(Long.parseLong(get("timeout", "60")));
    }

    private String get(String key, String fallback) {
        return args.getOrDefault(key, fallback);
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> parsed = new HashMap<>();
        for (String a : argv) {
            int eq = a.indexOf('=');
            if (eq > 0) {
                parsed.put(a.substring(0, eq), a.substring(eq + 1));
            }
        }
        int code = new QsPerf(parsed).run();
        System.exit(code);
    }

    private static long nowMicros() {
        java.time.Instant now = java.time.Instant.now();
        return now.getEpochSecond() * 1_000_000L + now.getNano() / 1_000;
    }

    private boolean beforeDeadline() {
        return System.nanoTime() - deadlineNanos < 0;
    }

    /** udp.xml from the jar, with one shared transport per process and discovery that stops once every member answered. */
    private ProtocolStackConfigurator stack() throws Exception {
        ProtocolStackConfigurator config = ConfiguratorFactory.getStackConfigurator("udp.xml");
        for (ProtocolConfiguration p : config.getProtocolStack()) {
            Map<String, String> props = p.getProperties();
            if (p.getProtocolName().equals("UDP")) {
                props.put("singleton_name", "qsperf-" + ProcessHandle.current().pid());
                props.put("bind_addr", "127.0.0.1");
                props.put("mcast_port", get("port", "45588"));
                props.put("mcast_addr", get("mcast", "228.8.8.8"));
                props.put("ip_ttl", "0");
                // Every channel of the process shares this transport: size its pools for the channels (joins of many
                // channels at once block on view acks that need a free thread).
                String threads = Integer.toString(Math.max(8, 2 * groups));
                props.put("thread_pool.max_threads", threads);
                props.put("oob_thread_pool.max_threads", threads);
            } else if (p.getProtocolName().equals("PING")) {
                props.put("num_initial_members", Integer.toString(receivers + 1));
                props.put("timeout", "1000");
            }
        }
        return config;
    }

    private final class Counter extends ReceiverAdapter {
        @Override
        public void receive(Message msg) {
            byte kind = msg.getLength() > 0 ? msg.getRawBuffer()[msg.getOffset()] : DATA;
            if (kind == DONE) {
                done.incrementAndGet();
                return;
            }

            if (sender) {
                return;
            }

            long now = nowMicros();
            if (kind != WARMUP && measured.getAndIncrement() == 0) {
                firstMeasuredMicros = now;
            }
            lastMicros = now;
            received.incrementAndGet();
        }
    }

    private void connectAll() throws Exception {
        for (int g = 0; g < groups; g++) {
            JChannel ch = new JChannel(stack()); // a fresh configurator each time: building a channel consumes its properties
            if (sender) {
                ch.setOpt(Channel.LOCAL, Boolean.FALSE);
            }
            ch.setReceiver(new Counter());
            channels.add(ch);
        }

        ExecutorService pool = Executors.newFixedThreadPool(Math.min(groups, 32));
        List<Future<?>> pending = new ArrayList<>();
        String cluster = get("cluster", "qsperf");
        for (int g = 0; g < groups; g++) {
            JChannel ch = channels.get(g);
            String name = cluster + "-" + g;
            pending.add(pool.submit(() -> {
                ch.connect(name);
                return null;
            }));
        }
        for (Future<?> f : pending) {
            f.get(Math.max(1, (deadlineNanos - System.nanoTime()) / 1_000_000), TimeUnit.MILLISECONDS);
        }
        pool.shutdown();
    }

    private boolean waitForMembers() throws InterruptedException {
        while (beforeDeadline()) {
            boolean all = true;
            for (JChannel ch : channels) {
                all &= ch.getView() != null && ch.getView().size() >= receivers + 1;
            }
            if (all) {
                return true;
            }
            Thread.sleep(10);
        }
        return false;
    }

    private int run() throws Exception {
        connectAll();
        System.out.println("READY");
        System.out.flush();
        boolean members = waitForMembers();
        return sender ? send(members) : receive(members);
    }

    private int send(boolean members) throws Exception {
        long start = nowMicros();
        long measuredStart = 0;
        long sent = 0;
        long total = warmup + messages;
        byte[] warm = new byte[size];
        warm[0] = WARMUP;
        byte[] payload = new byte[size];
        payload[0] = DATA;
        if (members) {
            for (; sent < total && beforeDeadline(); sent++) {
                if (sent == warmup) {
                    measuredStart = nowMicros();
                }
                channels.get((int) (sent % groups)).send(new Message(null, null, sent < warmup ? warm : payload));
            }
        }
        long end = nowMicros();
        while (done.get() < receivers && beforeDeadline()) {
            Thread.sleep(5);
        }
        System.out.println("RESULT role=sender sent=" + sent + " expected=" + total + " members=" + members
                + " done=" + done.get() + " start_us=" + start + " measured_start_us=" + measuredStart + " end_us=" + end);
        System.out.flush();
        return sent == total ? 0 : 2; // exits without leaving: closing hundreds of channels one by one takes seconds
    }

    private int receive(boolean members) throws Exception {
        long total = warmup + messages;
        while (received.get() < total && beforeDeadline()) {
            Thread.sleep(2);
        }
        long count = received.get();
        if (count >= total) {
            channels.get(0).send(new Message(null, null, new byte[] {DONE}));
        }
        System.out.println("RESULT role=receiver received=" + count + " expected=" + total + " measured=" + measured.get()
                + " members=" + members + " first_measured_us=" + firstMeasuredMicros + " last_us=" + lastMicros);
        System.out.flush();
        Thread.sleep(300); // let the DONE message (and any retransmission it needs) leave before exiting
        return count == total ? 0 : 2;
    }
}
