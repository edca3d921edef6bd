module gtrace.test/httpserver

go 1.17
