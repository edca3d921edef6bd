module example.com/sharedg

go 1.21
