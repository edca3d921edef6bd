module example.com/traceparent

go 1.24
