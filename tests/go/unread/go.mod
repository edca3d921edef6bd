module example.com/unread

go 1.21
