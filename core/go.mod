module github.com/ticketd/ticketd/core

go 1.26.7

require (
	github.com/cockroachdb/datadriven v1.0.3
	github.com/google/btree v1.1.3
	github.com/stretchr/testify v1.11.1
	google.golang.org/protobuf v1.36.12
	pgregory.net/rapid v1.3.0
)

require (
	github.com/davecgh/go-spew v1.1.1 // indirect
	github.com/pmezard/go-difflib v1.0.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)
