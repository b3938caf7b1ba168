import Foundation
import Testing

@testable import StepAPI

/// The byte-level header helpers that replaced Foundation's string functions on the request path.
@Suite("Header parsing on the request path")
struct HeaderParsingTests {
    @Test(
        "Content-Type is JSON in any case, with parameters and blanks, and nothing else is",
        arguments: [
            ("application/json", true), ("Application/JSON; charset=utf-8", true), ("  application/json \t;x", true),
            ("\tapplication/json", true), ("application/json;", true), ("application/jsonx", false),
            ("application/json-patch+json", false), ("", false), ("text/plain", false), (";application/json", false),
            ("application/ json", false), ("applicätion/json", false), ("application/x-www-form-urlencoded", false),
        ])
    func contentType(value: String, isJSON: Bool) {
        #expect(JSONBody.isJSON(value) == isJSON)
    }

    @Test(
        "optional whitespace is spaces and tabs at either end",
        arguments: [
            (" \t abc \t", "abc"), ("   ", ""), ("", ""), (" é ", "é"), ("a b", "a b"), ("\u{00A0}x", "\u{00A0}x"),
            ("日本 ", "日本"),
        ])
    func trimming(value: String, trimmed: String) {
        #expect(String(value[...].trimmingHTTPWhitespace) == trimmed)
    }
}
