import Configuration
import Foundation
import StepCore

#if canImport(Glibc)
    import Glibc
#endif

/// A configuration file that holds secrets other users of the machine may read: what the start warns of in
/// production, as PostgreSQL and OpenSSH refuse a private key file with such a mode (a warning here, since some
/// deployments mount configuration readable by a group on purpose).
package struct ConfigurationFileExposure: Sendable, Hashable, CustomStringConvertible {
    package var path: String
    /// The file's permission bits.
    package var mode: UInt32
    /// The keys whose values in the file are secret, sorted; never their values.
    package var keys: [String]

    /// The exposure of the file at `path`, or nil when users other than its owner may not read it (neither the
    /// group's nor the others' read bit), when it holds no secret value, or when it cannot be read (the start
    /// reports that itself). A value counts as secret when its key is declared secret and the value itself holds
    /// one: a key's or token's value always; a URL only when it carries credentials (a database URL's password, any
    /// other URL's user, a query that names a password, token, secret, key or signature, or a path segment that
    /// looks like a token: 16 or more letters, digits, `-` or `_`, with a letter and a digit); a SQLite path
    /// (`database.url`) never. A list's string is read as the server reads it, each comma-separated entry on its own.
    package static func check(path: String, catalog: ConfigurationCatalog = .app) -> ConfigurationFileExposure? {
        var info = stat()
        guard stat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
        let mode = UInt32(info.st_mode & 0o7777)
        guard mode & 0o044 != 0, let file = try? ConfigurationFile(path: path, catalog: catalog) else { return nil }
        let keys = file.settings.compactMap { key, setting -> String? in
            guard catalog.entry(named: key)?.isSecret == true, let content = setting.content else { return nil }
            let values: [String]
            switch content {
            // A list's string is read as comma-separated entries, each on its own; any other key's whole (a comma is
            // allowed in a URL, a password included).
            case .string(let text):
                values = listKeys.contains(key) ? text.split(separator: ",").map(String.init) : [text]
            case .stringArray(let texts): values = texts
            default: values = ["\(content)"]
            }
            return values.contains { holdsSecret($0, key: key) } ? key : nil
        }
        guard !keys.isEmpty else { return nil }
        return ConfigurationFileExposure(path: path, mode: mode, keys: keys.sorted())
    }

    /// The secret keys the server reads as lists (`SettingsReader.list`).
    static let listKeys: Set<String> = ["database.readReplicas"]

    /// Whether `value` of the secret key `key` holds a secret itself (see `check`).
    static func holdsSecret(_ value: String, key: String) -> Bool {
        let value = value.trimmingCharacters(in: .whitespaces)
        guard !value.isEmpty else { return false }
        let database = key.hasPrefix("database.")
        guard let schemeEnd = value.range(of: "://") else {
            // A database that is not a URL is a SQLite path; any other secret key's value is the secret itself.
            return key != "database.url"
        }
        let rest = value[schemeEnd.upperBound...]
        let authority = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        if let at = authority.lastIndex(of: "@") {
            // A database role's name alone is no secret (its password may come from elsewhere); another URL's user
            // may be a token itself.
            if !database || authority[..<at].contains(":") { return true }
        }
        let path = rest.dropFirst(authority.count).prefix { $0 != "?" && $0 != "#" }
        if !database, path.split(separator: "/").contains(where: looksLikeToken) { return true }
        guard let query = rest.split(separator: "?", maxSplits: 1).dropFirst().first else { return false }
        let revealing = ["password", "token", "secret", "key", "sig"]
        return query.split(separator: "&").contains { parameter in
            let name = parameter.prefix { $0 != "=" }.lowercased()
            return revealing.contains { name.contains($0) }
        }
    }

    /// A path segment a service would hand out as a credential (a webhook's token): long, of letters, digits, `-`
    /// and `_`, with a letter and a digit. A word or a number alone is not one.
    static func looksLikeToken(_ segment: Substring) -> Bool {
        segment.count >= 16
            && segment.unicodeScalars.allSatisfy {
                CharacterSet.alphanumerics.contains($0) && $0.isASCII || $0 == "-" || $0 == "_"
            }
            && segment.contains(where: \.isLetter) && segment.contains(where: \.isNumber)
    }

    /// What a production `serve` or `worker` warns of at start about its configuration file (`--config`), if
    /// anything: test-phase secrets are development ones.
    package static func startWarning(mode: ServiceMode, file: String?) -> String? {
        guard mode == .production, let file else { return nil }
        return check(path: file)?.description
    }

    package var description: String {
        "the configuration file \(path) holds secrets (\(keys.joined(separator: ", "))) that other users of this "
            + "machine may read (mode 0\(String(mode, radix: 8))): chmod 600 it, owned by the service's user, or give "
            + "them by environment variable"
    }
}
