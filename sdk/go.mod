module github.com/ticketd/ticketd/sdk

go 1.26.7

require (
	connectrpc.com/connect v1.19.1 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)
