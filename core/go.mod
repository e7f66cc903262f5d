module github.com/ticketd/ticketd/core

go 1.26.7

require (
	github.com/cockroachdb/datadriven v1.0.3 // indirect
	github.com/google/btree v1.1.3 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	github.com/stretchr/testify v1.11.1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
	pgregory.net/rapid v1.3.0 // indirect
)
