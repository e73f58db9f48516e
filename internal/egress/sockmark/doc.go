// Package sockmark sets SO_MARK on the egress sidecar's own outbound
// sockets, which the firewall lets out and the redirects skip. Setting a
// mark needs CAP_NET_ADMIN, which the sandbox never holds, so sandbox
// processes cannot forge it.
package sockmark
