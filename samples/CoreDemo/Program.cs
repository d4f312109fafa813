Console.WriteLine("demo: in progress");
