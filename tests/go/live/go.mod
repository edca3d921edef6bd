module example.com/live

go 1.17
