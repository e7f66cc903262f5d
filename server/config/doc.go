// Package config loads a ticketd node's configuration with koanf: defaults <
// YAML file < TICKETD_* environment variables < command-line flags, each
// layer overriding only the keys it sets (the layering etcd and Consul use).
//
// Every key has one spelling per layer, derived mechanically: the YAML key
// lease.min_ms (`lease: {min_ms: 250}`) is TICKETD_LEASE_MIN_MS in the
// environment and --lease-min-ms on the command line. The bootstrap list is a
// YAML list of {id, raft_addr, api_addr} or, in the environment and flags,
// "id=raft_addr/api_addr,...".
//
// # Usage
//
//  1. Register the flags on the command's flag set with RegisterFlags.
//  2. After parsing, call Load(configPath, nil, flags).
//  3. Call Validate before using the Config.
//
// Example:
//
//	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
//	config.RegisterFlags(fs)
//	_ = fs.Parse(os.Args[1:])
//	cfg, err := config.Load(path, nil, fs)
//	if err == nil {
//		err = cfg.Validate()
//	}
package config
