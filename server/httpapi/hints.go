package httpapi

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// apiPrefix starts the path of every ticket.v1 procedure.
const apiPrefix = "/ticket.v1."

// withHints answers, with a one-line hint in the body, two mistakes that
// connect-go answers with no body or a bare "404 page not found": a POST
// to an API procedure without a Content-Type (`curl
// -d` without -H sends none, or a form type), and a path under /ticket.v1.
// that names no procedure. Everything else goes to next unchanged.
func withHints(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, apiPrefix) {
			next.ServeHTTP(w, r)
			return
		}
		switch {
		case apiMethods()[r.URL.Path] == nil:
			service, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
			hint(w, http.StatusNotFound, "ticketd: no procedure %s; %s", r.URL.Path, knownProcedures(serviceDescriptor(service), service))
		case r.Method == http.MethodPost && r.Header.Get("Content-Type") == "":
			hint(w, http.StatusUnsupportedMediaType,
				"ticketd: missing Content-Type; for JSON send -H 'Content-Type: application/json' (Connect protocol, see docs/api.md)")
		case r.Method == http.MethodPost && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded"):
			hint(w, http.StatusUnsupportedMediaType,
				"ticketd: Content-Type %s is not supported (curl -d sends it by default); send -H 'Content-Type: application/json'",
				r.Header.Get("Content-Type"))
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// apiMethods maps the path of every procedure of the API's services
// ("/ticket.v1.LockService/Acquire") to its method, read once from the
// registered descriptors: every request looks its path up here, a map
// lookup instead of a walk of the global registry.
var apiMethods = sync.OnceValue(func() map[string]protoreflect.MethodDescriptor {
	paths := map[string]protoreflect.MethodDescriptor{}
	for _, name := range []string{ticketv1connect.LockServiceName, ticketv1connect.ClusterServiceName} {
		sd := serviceDescriptor(name)
		if sd == nil {
			continue
		}
		for i := 0; i < sd.Methods().Len(); i++ {
			m := sd.Methods().Get(i)
			paths["/"+name+"/"+string(m.Name())] = m
		}
	}
	return paths
})

// serviceDescriptor returns the registered service named full, nil if none.
func serviceDescriptor(full string) protoreflect.ServiceDescriptor {
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(full))
	if err != nil {
		return nil
	}
	sd, _ := d.(protoreflect.ServiceDescriptor)
	return sd
}

// knownProcedures lists the methods of sd, or the services, for a hint.
func knownProcedures(sd protoreflect.ServiceDescriptor, service string) string {
	if sd == nil {
		return fmt.Sprintf("no service %s: the services are ticket.v1.LockService and ticket.v1.ClusterService", service)
	}
	var names []string
	for i := 0; i < sd.Methods().Len(); i++ {
		names = append(names, string(sd.Methods().Get(i).Name()))
	}
	return fmt.Sprintf("%s has %s", sd.FullName(), strings.Join(names, ", "))
}

func hint(w http.ResponseWriter, code int, format string, args ...any) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, format+"\n", args...)
}
