//go:build unix

package main

import "syscall"

// restrictUmask sets the process umask to 077, so that every file and
// directory ticketd creates — badger's tables and logs, the Raft libraries'
// snapshots, anything a library opens with 0666 or 0755 — is reachable by
// its owner only, whatever umask ticketd was started under
// (docs/security.md#files-at-rest; PostgreSQL does the same). The backends also chmod the data dir
// tree at open and close (backends.RestrictTree); the umask closes the window
// between those, when badger creates files at run time.
func restrictUmask() { syscall.Umask(0o077) }
