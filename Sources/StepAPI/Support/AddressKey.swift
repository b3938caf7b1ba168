#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the address limits count by: an IPv4 address as it is, an IPv6 address by its /64 network (one subscriber's
/// share, which hands out any address inside it at no cost), an IPv4-mapped IPv6 address as its IPv4 address.
/// Anything that is not an IP address (`unknown`, a Unix socket) stays as it is.
enum AddressKey {
    static func of(_ address: String) -> String {
        guard address.contains(":") else { return address }
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        let octets = withUnsafeBytes(of: bytes) { Array($0) }
        if let v4 = ipv4(mappedIn: octets) { return v4 }
        let groups = stride(from: 0, to: 8, by: 2).map {
            String(UInt16(octets[$0]) << 8 | UInt16(octets[$0 + 1]), radix: 16)
        }
        return groups.joined(separator: ":") + "::/64"
    }

    /// An IPv4-mapped IPv6 address (`::ffff:10.0.0.2`, how a dual-stack socket reports an IPv4 peer) as its IPv4
    /// address; any other address as it is.
    static func unmapped(_ address: String) -> String {
        guard address.contains(":") else { return address }
        var bytes = in6_addr()
        guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
        return ipv4(mappedIn: withUnsafeBytes(of: bytes) { Array($0) }) ?? address
    }

    private static func ipv4(mappedIn octets: [UInt8]) -> String? {
        guard octets[0..<10].allSatisfy({ $0 == 0 }), octets[10] == 0xff, octets[11] == 0xff else { return nil }
        return octets[12...].map(String.init).joined(separator: ".")
    }
}
