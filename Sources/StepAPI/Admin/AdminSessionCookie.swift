import HTTPTypes
import Hummingbird

/// The console's session cookie, `stepledger_admin`: a random value whose digest names a row of
/// `operator_sessions`. `HttpOnly` keeps it from the page's script, `SameSite=Strict` from requests another site
/// starts, `Path=/admin` from every other route; `Secure` when `admin.secureCookie` is set (the server itself
/// speaks plain HTTP, so only its configuration knows that browsers reach it over https).
struct AdminSessionCookie: Sendable {
    static let name = "stepledger_admin"

    let secure: Bool

    /// The header that sets the cookie to `value` for `maxAgeSeconds`.
    func setting(_ value: String, maxAgeSeconds: Int) -> String {
        attributes("\(Self.name)=\(value); Max-Age=\(maxAgeSeconds)")
    }

    /// The header that makes the browser drop the cookie.
    var clearing: String { attributes("\(Self.name)=; Max-Age=0") }

    private func attributes(_ head: String) -> String {
        head + "; Path=/admin; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    /// The most values of the cookie a request is searched for.
    static let maximumValues = 4

    /// The cookie's non-empty values in a request's `Cookie` headers, in order, at most `maximumValues`. A browser
    /// sends every cookie of the name whose domain and path match, so a cookie another site under the same parent
    /// domain set (`Domain=` the parent, a longer path) may come before the console's own: each is tried.
    static func values(in request: Request) -> [String] {
        var values: [String] = []
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let trimmed = pair[...].trimmingHTTPWhitespace
                guard let equals = trimmed.firstIndex(of: "="), trimmed[..<equals] == name else { continue }
                let value = trimmed[trimmed.index(after: equals)...]
                if !value.isEmpty { values.append(String(value)) }
                if values.count == maximumValues { return values }
            }
        }
        return values
    }
}
