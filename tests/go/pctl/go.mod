module example.com/pctl

go 1.21
