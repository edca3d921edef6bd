module example.com/prod

go 1.21
