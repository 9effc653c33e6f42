/* Where this rank's communicator listens: the local end of the store
 * connection, which is the interface that routes to the master. A host
 * name that resolves to loopback (Debian's /etc/hosts maps it to
 * 127.0.1.1) would otherwise make a cross-node job listen where no other
 * node can reach it. */
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "dist/dist.h"

static int is_loopback(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
	if (sa->sa_family == AF_INET6) {
		const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;

		return IN6_IS_ADDR_LOOPBACK(a) ||
		       (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
	}
	return 0;
}

static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

/* Fills iface with the name of the interface that holds addr, or with a
 * replacement address when want_other (the first up, non-loopback one of
 * family fam) into buf. Returns 1 when something was found. */
static int scan_ifaces(const char *addr, int fam, int want_other, char *buf, size_t len,
		       char *iface, size_t ilen)
{
	struct ifaddrs *all, *i;
	char host[NI_MAXHOST];
	int found = 0;

	if (getifaddrs(&all) != 0)
		return 0;
	for (i = all; i && !found; i = i->ifa_next) {
		if (!i->ifa_addr || (i->ifa_addr->sa_family != AF_INET &&
				     i->ifa_addr->sa_family != AF_INET6))
			continue;
		if (getnameinfo(i->ifa_addr, sa_len(i->ifa_addr), host, sizeof(host), NULL, 0,
				NI_NUMERICHOST))
			continue;
		if (want_other) {
			if (i->ifa_addr->sa_family != fam || !(i->ifa_flags & IFF_UP) ||
			    (i->ifa_flags & IFF_LOOPBACK) || is_loopback(i->ifa_addr))
				continue;
			/* link-local IPv6 needs a scope the peers do not know */
			if (fam == AF_INET6 &&
			    IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
				continue;
			snprintf(buf, len, "%s", host);
			found = 1;
		} else if (strcmp(host, addr) == 0) {
			found = 1;
		}
		if (found)
			snprintf(iface, ilen, "%s", i->ifa_name);
	}
	freeifaddrs(all);
	return found;
}

const char *weft_dist_bind_host(const weft_dist_env *env, weft_store_client *c, char *buf,
				size_t len, char *iface, size_t ilen)
{
	struct addrinfo hints = { .ai_flags = AI_NUMERICHOST }, *ai = NULL;
	const char *ifname = getenv("GLOO_SOCKET_IFNAME");
	int loop, fam;

	if (ilen)
		iface[0] = 0;
	if ((ifname && *ifname) || !weft_store_client_local_addr(c, buf, len))
		return NULL;
	if (getaddrinfo(buf, NULL, &hints, &ai) != 0)
		return NULL;
	loop = is_loopback(ai->ai_addr);
	fam = ai->ai_family;
	freeaddrinfo(ai);
	if (!loop || env->local_world_size >= env->world_size) {
		scan_ifaces(buf, fam, 0, NULL, 0, iface, ilen);
		return buf;
	}
	/* several nodes, yet the master was reached over loopback: this is the
	 * master's node and its name resolves to loopback here */
	if (scan_ifaces(NULL, fam, 1, buf, len, iface, ilen))
		return buf;
	return NULL;
}
