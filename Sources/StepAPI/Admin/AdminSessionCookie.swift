import HTTPTypes
import Hummingbird

/// The console's session cookie: a random value whose digest names a row of `operator_sessions`. `HttpOnly` keeps it
/// from the page's script, `SameSite=Strict` from requests another site starts, `Path=/admin` from every other
/// route. With `admin.secureCookie` (the server itself speaks plain HTTP, so only its configuration knows that
/// browsers reach it over https) it is `Secure` and named `__Secure-stepledger_admin`: a browser keeps a cookie of
/// that name only when an https page set it with `Secure`, so a page served over plain http, or a network attacker
/// answering in its place, cannot plant one for the console to read; the plain name is then not read at all.
/// (`__Host-` would also forbid `Domain=`, but it needs `Path=/`, which would send the cookie to every route.)
struct AdminSessionCookie: Sendable {
    static let plainName = "stepledger_admin"
    static let secureName = "__Secure-stepledger_admin"

    let secure: Bool

    /// The cookie's name: `secureName` with `Secure`, else `plainName`.
    var name: String { secure ? Self.secureName : Self.plainName }

    /// The header that sets the cookie to `value` for `maxAgeSeconds`.
    func setting(_ value: String, maxAgeSeconds: Int) -> String {
        attributes("\(name)=\(value); Max-Age=\(maxAgeSeconds)")
    }

    /// The header that makes the browser drop the cookie.
    var clearing: String { attributes("\(name)=; Max-Age=0") }

    private func attributes(_ head: String) -> String {
        head + "; Path=/admin; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The most values of the cookie a request is searched for (looked up in one statement). More than a sibling
    /// site can sensibly plant ahead of the console's own: a browser keeps about 50 cookies for a domain.
    static let maximumValues = 64

    /// The cookie's non-empty values (by `name`) in a request's `Cookie` headers, in order, at most `maximumValues`.
    /// A browser sends every cookie of the name whose domain and path match, so a cookie another site under the same
    /// parent domain set (`Domain=` the parent, a longer path) may come before the console's own: each is tried.
    func values(in request: Request) -> [String] {
        var values: [String] = []
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let trimmed = pair[...].trimmingHTTPWhitespace
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == name else { continue }
                let value = trimmed[trimmed.index(after: equals)...]
                if !value.isEmpty { values.append(String(value)) }
                if values.count == Self.maximumValues { return values }
            }
        }
        return values
    }
}
