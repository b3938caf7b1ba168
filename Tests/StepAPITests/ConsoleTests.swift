import Foundation
import HTTPTypes
import HummingbirdTesting
import NIOCore
import StepAPI
import StepSettings
import StepTestSupport
import Testing

/// The console at `/admin/`: served from the binary with its security headers, only while the admin API is on, and
/// free of inline script, inline style and handler attributes (the CSP would refuse them in the browser).
@Suite("Console: page and assets")
struct ConsoleTests {
    static let policy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
        + "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    static let routes = [
        ("/admin/", "text/html; charset=utf-8"), ("/admin/assets/console.js", "text/javascript; charset=utf-8"),
        ("/admin/assets/console.css", "text/css; charset=utf-8"),
    ]

    static func harness(adminToken: String? = AdminTests.adminToken) async throws -> TestHarness {
        try await TestHarness.make { $0.adminToken = adminToken }
    }

    @Test("the page, script and style sheet are served with the console's headers, without authentication")
    func servedWithHeaders() async throws {
        try await Self.harness().run { client in
            for (uri, contentType) in Self.routes {
                let response = try await client.execute(uri: uri, method: .get)
                #expect(response.status == .ok, "\(uri)")
                #expect(response.headers[.contentType] == contentType, "\(uri)")
                #expect(response.headers[.contentSecurityPolicy] == Self.policy, "\(uri)")
                #expect(response.headers[.xContentTypeOptions] == "nosniff", "\(uri)")
                #expect(response.headers[HTTPField.Name("Referrer-Policy")!] == "no-referrer", "\(uri)")
                // Unversioned, even the script and style sheet are asked for again each time.
                #expect(response.headers[.cacheControl] == "no-cache", "\(uri)")
                #expect(response.headers[.eTag]?.count == 18, "\(uri)")
                #expect(response.headers[.setCookie] == nil, "\(uri)")
                #expect(!response.text.isEmpty, "\(uri)")
            }
        }
    }

    @Test("the page links the script and style sheet by version, and those URLs may be kept for a year")
    func versionedAssets() async throws {
        try await Self.harness().run { client in
            let page = try await client.execute(uri: "/admin/", method: .get).text
            let document = HTMLScan(page)
            let script = try #require(document.elements.first { $0.name == "script" }?.attributes["src"] ?? nil)
            let styleSheet = try #require(
                document.elements.first { $0.name == "link" && $0.attributes["rel"] == "stylesheet" }?
                    .attributes["href"] ?? nil)
            for (url, source) in [(script, ConsoleSources.script), (styleSheet, ConsoleSources.styleSheet)] {
                #expect(url.contains("?v="), "\(url)")
                let response = try await client.execute(uri: url, method: .get)
                #expect(response.status == .ok, "\(url)")
                #expect(response.text == source, "\(url)")
                #expect(response.headers[.cacheControl] == "public, max-age=31536000, immutable", "\(url)")
                #expect(url.hasSuffix(String(try #require(response.headers[.eTag]).dropFirst().dropLast())))
            }
            // A version that is not this build's is served, but never kept.
            let stale = try await client.execute(uri: "/admin/assets/console.js?v=0123456789abcdef", method: .get)
            #expect(stale.status == .ok)
            #expect(stale.headers[.cacheControl] == "no-cache")
        }
    }

    @Test("If-None-Match naming the ETag answers 304 without a body; another ETag gets the bytes")
    func conditional() async throws {
        try await Self.harness().run { client in
            for (uri, _) in Self.routes {
                let first = try await client.execute(uri: uri, method: .get)
                let etag = try #require(first.headers[.eTag])
                let again = try await client.execute(
                    uri: uri, method: .get, headers: [.ifNoneMatch: "W/\"x\", \(etag)"])
                #expect(again.status == .notModified, "\(uri)")
                #expect(again.body.readableBytes == 0, "\(uri)")
                #expect(again.headers[.eTag] == etag, "\(uri)")
                #expect(again.headers[.contentSecurityPolicy] == Self.policy, "\(uri)")
                let other = try await client.execute(uri: uri, method: .get, headers: [.ifNoneMatch: "\"other\""])
                #expect(other.status == .ok, "\(uri)")
                #expect(other.text == first.text, "\(uri)")
            }
        }
    }

    @Test("without the admin API the console is 404 like every /admin route, whatever the method or the origin")
    func absentWhenAdminIsOff() async throws {
        try await Self.harness(adminToken: nil).run { client in
            for (uri, _) in Self.routes {
                for method in [HTTPRequest.Method.get, .post] {
                    let response = try await client.execute(uri: uri, method: method)
                    #expect(response.status == .notFound, "\(method) \(uri)")
                    #expect(response.headers[.contentSecurityPolicy] == nil, "\(method) \(uri)")
                }
            }
            // Sent from another site, an admin route is still absent, not refused as cross-site.
            let nul = try await client.execute(uri: "/admin/reviews?x=%00", method: .get)
            #expect(nul.status == .notFound, "a URL with %00: absent, not a 400 that tells the route exists")
            for uri in ["/admin/session", "/admin/reviews/some-id/claim", "/admin/walkers/w/suspend"] {
                let response = try await client.execute(
                    uri: uri, method: .post,
                    headers: [.origin: "https://evil.example", .contentType: "application/json"],
                    body: ByteBuffer(string: "{}"))
                #expect(response.status == .notFound, "POST \(uri) from another site")
            }
        }
    }

    @Test("the console serves GET only: another method is 405 naming GET")
    func getOnly() async throws {
        try await Self.harness().run { client in
            for (uri, _) in Self.routes {
                let response = try await client.execute(uri: uri, method: .post)
                #expect(response.status == .methodNotAllowed, "\(uri)")
                #expect(response.headers[HTTPField.Name("Allow")!] == "GET", "\(uri)")
            }
        }
    }

    @Test("the page has no inline script, no inline style, no handler attribute and no javascript: URL")
    func noInlineCode() throws {
        let document = HTMLScan(ConsoleSources.html)
        #expect(document.elements.count > 50)
        #expect(document.problems == [])
        let scripts = document.elements.filter { $0.name == "script" }
        #expect(scripts.count == 1)
        for script in scripts {
            #expect(script.attributes["src"] != nil)
            #expect(script.content.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty, "a <script> with a body")
        }
        #expect(!document.elements.contains { $0.name == "style" })
        for element in document.elements {
            for (name, value) in element.attributes {
                #expect(name != "style", "<\(element.name) style=…>")
                #expect(!name.hasPrefix("on"), "<\(element.name) \(name)=…>")
                let url = (value ?? "").lowercased().filter { !$0.isWhitespace }
                #expect(!url.hasPrefix("javascript:"), "<\(element.name) \(name)=\(value ?? "")>")
            }
        }
        // The same check catches what it is meant to catch.
        let bad = HTMLScan(
            #"<p style="color:red" onclick="x()"><script>alert(1)</script><style>p{}</style><a href=" JavaScript:x">"#)
        #expect(bad.elements.contains { $0.attributes.keys.contains("style") })
        #expect(bad.elements.contains { $0.attributes.keys.contains("onclick") })
        #expect(bad.elements.contains { $0.name == "script" && $0.content == "alert(1)" })
        #expect(bad.elements.contains { $0.name == "style" })
    }

    @Test("the script builds the page with the DOM: no HTML from text, no eval, no web storage, no inline style")
    func scriptStaysInsideThePolicy() {
        // The one absolute URL is SVG's namespace name, which is never fetched.
        let script = ConsoleSources.script.replacingOccurrences(of: "\"http://www.w3.org/2000/svg\"", with: "")
        for forbidden in [
            "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function",
            "localStorage", "sessionStorage", "setAttribute(\"style\"", ".style.", "cssText", "http://", "https://",
        ] {
            #expect(!script.contains(forbidden), "console.js uses \(forbidden)")
        }
        #expect(!ConsoleSources.styleSheet.contains("@import"))
        #expect(!ConsoleSources.styleSheet.contains("url("))
    }

    @Test("the compiled-in assets are exactly the sources in Console/Assets (run scripts/embed-console-assets)")
    func generatedFileIsCurrent() throws {
        let assets = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources/StepAPI/Console/Assets")
        for (file, compiled) in [
            ("console.html", ConsoleSources.html), ("console.js", ConsoleSources.script),
            ("console.css", ConsoleSources.styleSheet),
        ] {
            let source = try String(contentsOf: assets.appendingPathComponent(file), encoding: .utf8)
            #expect(source == compiled, "\(file) differs from ConsoleSources.swift: run scripts/embed-console-assets")
        }
    }

    @Test("the audit page's action filter offers every action the server writes to the admin audit")
    func auditActionsOffered() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Sources")
        // Every action is written from a literal "area.verb" in the server's Swift (the console's own copy aside).
        let literal = /"((?:review|walker|job|day|operator)\.[a-z]+)"/
        var written: Set<String> = []
        let files = try #require(FileManager.default.enumerator(atPath: sources.path))
        for case let path as String in files where path.hasSuffix(".swift") && !path.hasSuffix("ConsoleSources.swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(path), encoding: .utf8)
            for match in text.matches(of: literal) { written.insert(String(match.1)) }
        }
        #expect(written.contains("walker.erase") && written.contains("review.accept") && written.count >= 13)
        let script = ConsoleSources.script
        let start = try #require(script.range(of: "const AUDIT_ACTIONS = ["))
        let end = try #require(script.range(of: "];", range: start.upperBound..<script.endIndex))
        let offered = Set(script[start.upperBound..<end.lowerBound].matches(of: literal).map { String($0.1) })
        #expect(written.subtracting(offered).isEmpty, "not offered: \(written.subtracting(offered).sorted())")
        #expect(
            offered.subtracting(written).isEmpty, "offered, never written: \(offered.subtracting(written).sorted())")
    }
}

/// A small HTML tokenizer, enough to list the console page's elements with their attributes and the raw text of
/// `<script>` and `<style>` elements. It reports what it cannot read instead of guessing.
struct HTMLScan {
    struct Element {
        var name: String
        var attributes: [String: String?]
        /// The raw text up to the closing tag, for `script` and `style` only.
        var content: String
    }

    private(set) var elements: [Element] = []
    private(set) var problems: [String] = []

    init(_ html: String) {
        var rest = Substring(html)
        while let open = rest.firstIndex(of: "<") {
            rest = rest[rest.index(after: open)...]
            if rest.hasPrefix("!--") {
                guard let end = rest.range(of: "-->") else {
                    problems.append("an unclosed comment")
                    return
                }
                rest = rest[end.upperBound...]
                continue
            }
            if rest.hasPrefix("!") || rest.hasPrefix("/") {
                guard let end = rest.firstIndex(of: ">") else { return }
                rest = rest[rest.index(after: end)...]
                continue
            }
            guard let element = readTag(&rest) else { continue }
            var found = element
            if element.name == "script" || element.name == "style" {
                guard let close = rest.range(of: "</\(element.name)", options: .caseInsensitive) else {
                    problems.append("an unclosed <\(element.name)>")
                    return
                }
                found.content = String(rest[..<close.lowerBound])
                rest = rest[close.upperBound...]
            }
            elements.append(found)
        }
    }

    /// Reads `name attr="v" attr='v' attr=v attr>` after `<`; nil when `<` did not start a tag.
    private mutating func readTag(_ rest: inout Substring) -> Element? {
        let name = rest.prefix { $0.isLetter || $0.isNumber || $0 == "-" }
        guard !name.isEmpty else { return nil }
        rest = rest[name.endIndex...]
        var element = Element(name: name.lowercased(), attributes: [:], content: "")
        while true {
            rest = rest.drop { $0.isWhitespace || $0 == "/" }
            guard let first = rest.first else {
                problems.append("an unclosed <\(element.name)>")
                return element
            }
            if first == ">" {
                rest = rest.dropFirst()
                return element
            }
            let attribute = rest.prefix { !$0.isWhitespace && $0 != "=" && $0 != ">" && $0 != "/" }
            guard !attribute.isEmpty else {
                problems.append("an unreadable attribute in <\(element.name)>")
                rest = rest.dropFirst()
                continue
            }
            rest = rest[attribute.endIndex...]
            var value: String?
            if rest.first == "=" {
                rest = rest.dropFirst()
                if let quote = rest.first, quote == "\"" || quote == "'" {
                    rest = rest.dropFirst()
                    let text = rest.prefix { $0 != quote }
                    value = String(text)
                    rest = rest[text.endIndex...].dropFirst()
                } else {
                    let text = rest.prefix { !$0.isWhitespace && $0 != ">" }
                    value = String(text)
                    rest = rest[text.endIndex...]
                }
            }
            if element.attributes.keys.contains(attribute.lowercased()) {
                problems.append("a repeated attribute \(attribute) in <\(element.name)>")
            }
            element.attributes[attribute.lowercased()] = value
        }
    }
}
