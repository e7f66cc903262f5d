//go:build !unix

package main

// restrictUmask does nothing where there is no umask; data file modes are
// then the backends' explicit chmods only.
func restrictUmask() {}
