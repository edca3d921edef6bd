module example.com/goexit

go 1.21
