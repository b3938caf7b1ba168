import Configuration
import Testing

@testable import StepSettings

/// Production fetches key sets only over https (or from this machine's loopback): keys fetched in the clear could be
/// anyone's on the path, and a forged key set signs in as any walker or passes App Check.
@Suite("Key-set URLs in production")
struct KeySetURLTests {
    static let production = ["mode": "production", "appCheck.projectNumber": "123456789012"]

    @Test(
        "an http:// key-set URL to another machine is refused in production, naming the key",
        arguments: [
            ("jwt.jwksUrl", "http://auth.example/jwks.json"),
            ("jwt.jwksUrl", "http://127.evil.example/jwks.json"),
            ("jwt.jwksUrl", "http://10.0.0.7:8080/jwks.json"),
            // The resolver reads a leading zero as octal: 0127.0.0.1 is 87.0.0.1, another machine.
            ("jwt.jwksUrl", "http://0127.0.0.1:8080/jwks.json"),
            ("jwt.jwksUrl", "http://127.0.0.01/jwks.json"),
            ("jwt.jwksUrl", "http://+127.0.0.1/jwks.json"),
            ("appCheck.jwksUrl", "http://keys.example/v1/jwks"),
        ])
    func refused(key: String, url: String) {
        var values = Self.production.merging([key: url]) { $1 }
        if key != "jwt.jwksUrl" { values["jwt.jwksFile"] = "/k.json" }
        #expect {
            _ = try AppConfiguration(reader: reader(values))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == key && error.problem.contains("must be an https:// URL in production mode")
        }
    }

    @Test(
        "https, and http to this machine's loopback, are taken in production; test-phase takes any http(s) URL",
        arguments: [
            "https://auth.example/jwks.json", "http://127.0.0.1:8080/jwks.json", "http://127.0.0.0:8080/jwks.json",
            "http://localhost:9/jwks.json", "http://[::1]:9/jwks.json",
        ])
    func taken(url: String) throws {
        let configuration = try AppConfiguration(
            reader: reader(Self.production.merging(["jwt.jwksUrl": url, "appCheck.jwksUrl": url]) { $1 }))
        #expect(configuration.jwt.jwks == .url(url))
        #expect(configuration.appCheck.jwks == .url(url))
        let testPhase = try AppConfiguration(reader: reader(["jwt.jwksUrl": "http://auth.example/jwks.json"]))
        #expect(testPhase.jwt.jwks == .url("http://auth.example/jwks.json"))
    }

    @Test(
        "a key-set URL without a host, or that does not parse, is refused at the start in every mode, naming the key",
        arguments: [
            ("jwt.jwksUrl", "https://"), ("jwt.jwksUrl", "https://auth example/jwks.json"),
            ("appCheck.jwksUrl", "https://"), ("appCheck.jwksUrl", "http:///jwks.json"),
        ])
    func noHost(key: String, url: String) {
        for values in [Self.production, [:]] {
            var values = values.merging([key: url]) { $1 }
            if key != "jwt.jwksUrl" { values["jwt.jwksFile"] = "/k.json" }
            #expect {
                _ = try AppConfiguration(reader: reader(values))
            } throws: { error in
                guard let error = error as? ConfigurationError else { return false }
                return error.key == key && error.problem == "must be an http(s) URL with a host"
            }
        }
    }
}
