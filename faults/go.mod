module github.com/ticketd/ticketd/faults

go 1.26.7

require (
	github.com/ticketd/ticketd/backends v0.0.0
	github.com/ticketd/ticketd/core v0.0.0
	github.com/ticketd/ticketd/sdk v0.0.0
	github.com/ticketd/ticketd/server v0.0.0
)

require github.com/anishathalye/porcupine v1.3.1 // indirect

replace (
	github.com/ticketd/ticketd/backends => ../backends
	github.com/ticketd/ticketd/core => ../core
	github.com/ticketd/ticketd/sdk => ../sdk
	github.com/ticketd/ticketd/server => ../server
)
