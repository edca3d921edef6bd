module example.com/duty

go 1.21
