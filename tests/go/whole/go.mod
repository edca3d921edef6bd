module whole

go 1.17
