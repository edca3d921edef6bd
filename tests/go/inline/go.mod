module example.com/inline

go 1.17
