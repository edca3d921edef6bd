module example.com/worker

go 1.21
