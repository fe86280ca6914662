module github.com/iwarpgo/iwarp

go 1.26
