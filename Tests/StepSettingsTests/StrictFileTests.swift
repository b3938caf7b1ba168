import Foundation
import Logging
import StepCore
import Testing

@testable import StepSettings

/// `stepd --config FILE`: nothing in the file is ignored without a word, and each refusal names the file and
/// the place.
@Suite("Strict configuration file")
struct StrictFileTests {
    func sourceError(_ contents: String) throws -> ConfigurationSourceError {
        let error = try loadingError(file: contents)
        return try #require(error as? ConfigurationSourceError, "\(String(describing: error))")
    }

    @Test("a misspelt key is refused, naming the file, the key and the nearest known key")
    func misspeltKey() throws {
        let error = try sourceError(#"{"http": {"prot": 9001}}"#)
        #expect(error.problem == .unknownKey("http.prot", suggestion: "http.port"))
        #expect(error.position == TextPosition(line: 1, column: 11))
        #expect(error.source.hasSuffix("/config.json"))
        #expect(error.description.hasSuffix("config.json:1:11: unknown key 'http.prot' (did you mean 'http.port'?)"))
    }

    @Test("an unknown section is refused with the nearest section, even when it is empty")
    func unknownSection() throws {
        #expect(try sourceError(#"{"htp": {"port": 9001}}"#).problem == .unknownSection("htp", suggestion: "http"))
        #expect(
            try sourceError(#"{"rateLimits": {}}"#).problem == .unknownSection("rateLimits", suggestion: "rateLimit"))
        #expect(try sourceError(#"{"tls": {"cert": "x"}}"#).problem == .unknownSection("tls", suggestion: nil))
        #expect(try sourceError(#"{"htp.port": 1}"#).problem == .unknownSection("htp", suggestion: "http"))
    }

    @Test("a key in the wrong section, or a top-level key that does not exist, is refused")
    func unknownKeys() throws {
        #expect(
            try sourceError(#"{"http": {"devSecret": "x"}}"#).problem
                == .unknownKey("http.devSecret", suggestion: "jwt.devSecret"))
        #expect(try sourceError(#"{"mdoe": "production"}"#).problem == .unknownKey("mdoe", suggestion: "mode"))
        #expect(
            try sourceError(#"{"http": {"tls": {"on": true}}}"#).problem == .unknownKey("http.tls", suggestion: nil))
    }

    @Test("a key given twice is refused at its second place, whichever way it is written")
    func duplicateKey() throws {
        let twice = try sourceError("{\"http\": {\n  \"port\": 9001,\n  \"port\": 9002\n}}")
        #expect(twice.problem == .duplicateKey("http.port"))
        #expect(twice.position == TextPosition(line: 3, column: 3))
        #expect(twice.description.hasSuffix("config.json:3:3: duplicate key 'http.port'"))
        let dotted = try sourceError(#"{"http": {"port": 9001}, "http.port": 9002}"#)
        #expect(dotted.problem == .duplicateKey("http.port"))
        // Two objects for one section would otherwise drop the first one's keys without a word.
        let sections = try sourceError(#"{"http": {"port": 9001}, "http": {"host": "0.0.0.0"}}"#)
        #expect(sections.problem == .duplicateKey("http"))
    }

    @Test("a trailing comma is refused, naming the file, line and column of the comma")
    func trailingComma() throws {
        let error = try sourceError("{\n  \"http\": {\"port\": 9001},\n}\n")
        #expect(error.problem == .malformed(reason: "trailing comma before '}'"))
        #expect(error.position == TextPosition(line: 2, column: 25))
        #expect(error.description.hasSuffix("config.json:2:25: not valid JSON: trailing comma before '}'"))
        let list = try sourceError(#"{"appCheck": {"appIds": ["a", "b",]}}"#)
        #expect(list.problem == .malformed(reason: "trailing comma before ']'"))
    }

    @Test(
        "malformed JSON is refused at its line and column",
        arguments: [
            (
                "{\"http\": {\"port\": 9001}", 1, 24,
                "expected ',' or '}' after the value of \"http\", found end of file"
            ),
            ("{\"http\": {\"port\": 90 01}}", 1, 22, "expected ',' or '}' after the value of \"port\", found '0'"),
            ("{\"mode\": test-phase}", 1, 10, "expected a value, found 't'"),
            ("{\"admin\": {\"token\": trustno1-secret}}", 1, 21, "expected a value, found 't'"),
            ("{\"http\": {\"port\": 1e99999}}", 1, 19, "a number is out of range"),
            ("{\"mode\": 'production'}", 1, 10, "expected a value, found '''"),
            ("{mode: \"production\"}", 1, 2, "expected a key in double quotes, found 'm'"),
            ("{\"mode\" \"production\"}", 1, 9, "expected ':' after the key \"mode\", found '\"'"),
            (
                "{\"mode\": \"prod\nuction\"}", 1, 15,
                "a control character in a string (write it as an escape such as \\n)"
            ),
            ("{\"mode\": \"production}", 1, 10, "unterminated string"),
            ("{\"http\": {\"port\": 08080}}", 1, 19, "a number with a leading zero"),
            ("{\"mode\": \"x\"} // comment", 1, 15, "unexpected '/' after the configuration object"),
            ("[\"mode\"]", 1, 1, "the configuration must be one JSON object ({ … })"),
            ("  \n", 2, 1, "the file is empty, expected a JSON object"),
            ("{\"jwt\": {\"issuer\": \"é\\q\"}}", 1, 22, "an invalid escape '\\q'"),
        ])
    func malformed(text: String, line: Int, column: Int, reason: String) throws {
        let error = try sourceError(text)
        #expect(error.problem == .malformed(reason: reason))
        #expect(error.position == TextPosition(line: line, column: column))
        #expect(error.description.contains("config.json:\(line):\(column): not valid JSON: "))
    }

    @Test("a section given a value, or a key given an object, is refused")
    func misplaced() throws {
        #expect(
            try sourceError(#"{"http": 9001}"#).problem
                == .misplaced("http", reason: "is a section: it takes an object of keys"))
        #expect(
            try sourceError(#"{"http": {"port": {"value": 9001}}}"#).problem
                == .misplaced("http.port", reason: "is a key: it takes a value, not an object"))
        #expect(
            try sourceError(#"{"appCheck": {"appIds": [1, 2]}}"#).problem
                == .misplaced(
                    "appCheck.appIds", reason: "takes a value or a list of strings, not a list of other things"))
    }

    @Test("a missing file, a directory and a path through a file are refused naming them")
    func missingFile() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("absent-\(UUID().uuidString).json")
            .path
        #expect(throws: ConfigurationSourceError(source: path, problem: .unreadable(reason: "no such file"))) {
            try ConfigurationSources(file: path).load()
        }
        let directory = FileManager.default.temporaryDirectory.path
        #expect(throws: ConfigurationSourceError(source: directory, problem: .unreadable(reason: "a directory"))) {
            try ConfigurationSources(file: directory).load()
        }
        // A path through a file is missing too, not a failure of some other kind.
        let file = try TemporaryConfigFile("{}")
        defer { file.remove() }
        let through = file.path + "/stepledger.json"
        #expect(throws: ConfigurationSourceError(source: through, problem: .unreadable(reason: "no such file"))) {
            try ConfigurationSources(file: through).load()
        }
    }

    @Test("a well-formed file is read: nested, dotted, lists, null as unset, a byte-order mark")
    func wellFormed() throws {
        let file = try TemporaryConfigFile(
            "\u{FEFF}{\"http\": {\"port\": 9001, \"host\": \"0.0.0.0\"}, \"jobs.maxAttempts\": 4, "
                + "\"appCheck\": {\"appIds\": [\"1:2:ios:3\", \" 1:2:android:4 \"]}, \"log\": {\"level\": null}, "
                + "\"ingest\": {\"maxStepRatePerSecond\": 2.5, \"sourceWhitelist\": \"a.b, c.d\"}, "
                + "\"worker\": {\"enabled\": false}, \"jwt\": {\"issuer\": \"caf\\u00e9 \\ud83d\\ude00\"}}")
        defer { file.remove() }
        let configuration = try ConfigurationSources(file: file.path).load()
        #expect(configuration.http.port == 9001)
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.jobs.maxAttempts == 4)
        #expect(configuration.appCheck.appIds == ["1:2:ios:3", "1:2:android:4"])
        #expect(configuration.telemetry.logLevel == .info)
        #expect(configuration.limits.maxStepRatePerSecond == 2.5)
        #expect(configuration.limits.sourceBundleWhitelist == ["a.b", "c.d"])
        #expect(configuration.worker.enabled == false)
        #expect(configuration.jwt.issuer == "café 😀")
    }

    @Test("a value the validation refuses names the file position it was written at")
    func validationNamesPlace() throws {
        let error = try loadingError(file: "{\"http\": {\n  \"port\": 70000\n}}")
        let refused = try #require(error as? ConfigurationError)
        #expect(refused.key == "http.port")
        #expect(refused.source?.hasSuffix("config.json:2:11") == true)
        #expect(
            refused.description.hasSuffix(
                "config.json:2:11: configuration key 'http.port' must be between 0 and 65535"))
    }

    @Test("a value of the wrong JSON type is refused rather than ignored")
    func wrongType() throws {
        for (text, key) in [
            (#"{"http": {"host": true}}"#, "http.host"), (#"{"http": {"port": 8080.5}}"#, "http.port"),
            (#"{"worker": {"enabled": 1}}"#, "worker.enabled"), (#"{"http": {"port": ["1"]}}"#, "http.port"),
        ] {
            let error = try loadingError(file: text)
            #expect((error as? ConfigurationError)?.key == key, "\(text)")
        }
    }
}
