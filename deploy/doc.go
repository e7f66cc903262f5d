// Package deploy holds the tests of ticketd's release and deployment files
// (docs/operations.md, Deploying): the binaries and checksums of `make
// release`, the container image built from container/Containerfile, the
// systemd unit systemd/ticketd.service and the Kubernetes manifests under
// kubernetes/.
//
// It is a module of its own so that the Kubernetes API types the manifests
// are decoded with stay out of the server's dependencies.
package deploy
