package admin

import "net/http"

// Routes returns the patterns an admin handler serves and what each
// checks the role for: "none" (open to every authenticated role),
// "superuser", "tenant-admin", "lookup", "produce" or "consume".
func Routes(h http.Handler) map[string]string {
	names := map[operation]string{opNone: "none", opSuperUser: "superuser", opTenantAdmin: "tenant-admin",
		opLookup: "lookup", opProduce: "produce", opConsume: "consume"}
	out := map[string]string{}
	for _, r := range h.(*handler).routes {
		out[r.pattern] = names[r.op]
	}
	return out
}
