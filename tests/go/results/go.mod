module example.com/results

go 1.17
