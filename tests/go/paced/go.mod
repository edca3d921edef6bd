module example.com/paced

go 1.21
