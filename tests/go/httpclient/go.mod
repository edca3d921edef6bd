module gtrace.test/httpclient

go 1.22
