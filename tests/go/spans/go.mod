module example.com/spans

go 1.21
