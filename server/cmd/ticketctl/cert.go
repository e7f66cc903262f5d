package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/server/security"
)

// newCertCmd builds "ticketctl cert": a CA, node and client certificates as
// PEM files in --certs-dir, made with crypto/x509 (no openssl needed; like
// `cockroach cert` and `consul tls`). Keys are written with mode 0600.
func newCertCmd(stdout io.Writer) *cobra.Command {
	var (
		dir       string
		overwrite bool
		validity  time.Duration
	)
	cmd := &cobra.Command{
		Use:   "cert",
		Short: "Create a CA, node and client certificates (PEM files in --certs-dir)",
		Long: `Create TLS material for ticketd in --certs-dir:

  ticketctl cert create-ca                       ca.crt, ca.key
  ticketctl cert create-node --id n1 --hosts 127.0.0.1,localhost,n1.example.com
                                                 node-n1.crt, node-n1.key (node.* without --id)
  ticketctl cert create-client --name orders-svc client.orders-svc.crt, client.orders-svc.key

Node certificates serve the client API and peer traffic (server and client
auth); a client certificate's CN is the principal. One CA may sign both.
Keys are written with mode 0600; existing files are kept unless --overwrite.`,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&dir, "certs-dir", "certs", "directory of the CA and the certificates")
	pf.BoolVar(&overwrite, "overwrite", false, "replace existing files")
	pf.DurationVar(&validity, "validity", 0, "validity period (default: 5 years for a CA, 2 years otherwise)")
	valid := func(def time.Duration) time.Duration {
		if validity > 0 {
			return validity
		}
		return def
	}
	wrote := func(names ...string) {
		for _, n := range names {
			fmt.Fprintln(stdout, "wrote", filepath.Join(dir, n))
		}
	}

	cmd.AddCommand(&cobra.Command{
		Use:   "create-ca",
		Short: "Create a CA (ca.crt, ca.key)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if _, err := security.CreateCA(dir, valid(security.DefaultCAValidity), overwrite); err != nil {
				return err
			}
			wrote(security.CACertFile, security.CAKeyFile)
			return nil
		},
	})

	var id, hosts string
	node := &cobra.Command{
		Use:   "create-node",
		Short: "Create a node certificate signed by the CA (node-<id>.crt; one per node: its CN is the node id)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if id == "" {
				return fmt.Errorf("--id is required: each node needs a certificate of its own, whose CN is its --id (peers accept a certificate only as the member it names)")
			}
			var hs []string
			for _, h := range strings.Split(hosts, ",") {
				if h = strings.TrimSpace(h); h != "" {
					hs = append(hs, h)
				}
			}
			if len(hs) == 0 {
				return fmt.Errorf("--hosts: at least one host name or IP address")
			}
			if _, err := security.CreateNode(dir, id, hs, valid(security.DefaultCertValidity), overwrite); err != nil {
				return err
			}
			wrote(security.NodeFiles(id))
			return nil
		},
	}
	node.Flags().StringVar(&id, "id", "", "node id (required): the CN and the file names node-<id>.*")
	node.Flags().StringVar(&hosts, "hosts", "127.0.0.1,localhost", "comma-separated DNS names and IP addresses the node is reached at")
	cmd.AddCommand(node)

	var name string
	client := &cobra.Command{
		Use:   "create-client",
		Short: "Create a client certificate signed by the CA (CN = --name, the principal)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if name == "" {
				return fmt.Errorf("--name is required")
			}
			if _, err := security.CreateClient(dir, name, valid(security.DefaultCertValidity), overwrite); err != nil {
				return err
			}
			wrote(security.ClientFiles(name))
			return nil
		},
	}
	client.Flags().StringVar(&name, "name", "", "principal (certificate CN), for instance orders-svc")
	cmd.AddCommand(client)
	return cmd
}
