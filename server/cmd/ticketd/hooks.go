package main

import "github.com/ticketd/ticketd/server"

// extraOptions are server.Options that build-tagged files add from init
// functions (faults_hook.go, built with -tags faults, adds the
// fault-injection hook). Empty in a normal build; serve appends them to the
// options of server.New.
var extraOptions []server.Option
