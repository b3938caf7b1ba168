import Foundation

/// Where session verification keys (or App Check keys) come from.
package enum JWKSSource: Sendable, Hashable {
    case none
    case file(String)
    case url(String)
}

extension SettingsReader {
    /// A key set from a file or a URL, never both; nil when neither key is set.
    func jwksSource(file fileKey: Key, url urlKey: Key) throws -> JWKSSource? {
        switch (try string(fileKey), try string(urlKey)) {
        case (.some, .some):
            throw error(urlKey, "cannot be set together with \(fileKey.name)")
        case (.some(let file), nil):
            return .file(file)
        case (nil, .some(let url)):
            // Parsed as it will be fetched, with a host: `https://` alone (or a URL with a space in it) would pass
            // the start and fail every fetch of the keys, so every request that needs them.
            guard url.hasPrefix("https://") || url.hasPrefix("http://"), let parsed = URL(string: url),
                parsed.host?.isEmpty == false
            else {
                throw error(urlKey, "must be an http(s) URL with a host")
            }
            if let problem = OutboundURL.portProblem(url) { throw error(urlKey, problem) }
            return .url(url)
        case (nil, nil):
            return nil
        }
    }
}
