package main

import (
	"fmt"
	"io"
	"math/big"
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
  ticketctl cert revoke --cert client.orders-svc.crt (or --serial N)
                                                 ca.crl: the CA's revocation list, created or extended

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
	cmd.AddCommand(newCertRevokeCmd(stdout, &dir, valid))
	return cmd
}

// newCertRevokeCmd builds "ticketctl cert revoke": add a certificate of the
// CA in --certs-dir to its revocation list (ca.crl), which nodes load with
// --client-crl-file or --peer-crl-file and reload when it changes.
func newCertRevokeCmd(stdout io.Writer, dir *string, valid func(time.Duration) time.Duration) *cobra.Command {
	var serial, certFile string
	cmd := &cobra.Command{
		Use:   "revoke",
		Short: "Revoke a certificate of the CA: add it to ca.crl (--serial N or --cert FILE)",
		Long: `Add a certificate issued by the CA in --certs-dir to the CA's revocation list,
ca.crl in the same directory, creating the list or extending it: earlier
entries are kept, the CRL number grows by one, and the list is signed by the
CA key and current for --validity (default 30 days; nodes keep enforcing an
older list and log a warning). Point --client-crl-file or --peer-crl-file at
ca.crl: nodes reload it when it changes (or on SIGHUP) and refuse the
certificate at the next TLS handshake. Existing connections are not cut.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if (serial == "") == (certFile == "") {
				return usagef("give exactly one of --serial and --cert")
			}
			var (
				n  *big.Int
				cn string
			)
			if certFile != "" {
				s, c, err := security.CertSerial(*dir, certFile)
				if err != nil {
					return err
				}
				n, cn = s, c.Subject.CommonName
			} else {
				var ok bool
				if n, ok = new(big.Int).SetString(serial, 0); !ok || n.Sign() <= 0 {
					return usagef("--serial %q: want a positive integer (decimal, or hex with 0x)", serial)
				}
			}
			r, err := security.Revoke(*dir, n, valid(security.DefaultCRLValidity))
			if err != nil {
				return err
			}
			what := "revoked"
			if r.Already {
				what = "already revoked"
			}
			if cn != "" {
				what += fmt.Sprintf(" %q", cn)
			}
			fmt.Fprintf(stdout, "%s serial %s (0x%x); wrote %s: CRL number %s, %d revoked, next update %s\n",
				what, r.Serial, r.Serial, r.Path, r.Number, r.Entries, r.NextUpdate.UTC().Format(time.RFC3339))
			return nil
		},
	}
	cmd.Flags().StringVar(&serial, "serial", "", "serial number of the certificate to revoke (decimal, or hex with 0x)")
	cmd.Flags().StringVar(&certFile, "cert", "", "PEM certificate to revoke (must be issued by the CA in --certs-dir)")
	return cmd
}
