module example.com/survivor

go 1.21
