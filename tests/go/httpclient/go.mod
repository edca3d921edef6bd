module gtrace.test/httpclient

go 1.17
