import Configuration
import StepCore
import Testing

@testable import StepSettings

/// `dev.*`: test-phase's development shortcuts are explicit settings, on by default only while no JWKS is
/// configured, and refused in production.
@Suite("Development shortcut settings")
struct DevSettingsTests {
    static let production = ["mode": "production", "jwt.jwksFile": "/k.json", "appCheck.projectNumber": "123456789012"]

    @Test("without a JWKS both shortcuts are on by default, so the quick start works")
    func defaultsWithoutJWKS() throws {
        let configuration = try AppConfiguration(reader: reader([:]))
        #expect(configuration.dev.sessionTokens == nil)
        #expect(configuration.dev.appAttestAuthority == nil)
        #expect(configuration.acceptsDevelopmentSessionTokens)
        #expect(configuration.trustsDevelopmentAppAttestAuthority)
        #expect(configuration.developmentTokenWarning == nil)
        #expect(configuration.developmentDeviceWarning == nil)
        let summary = try #require(configuration.developmentShortcutsSummary)
        #expect(!summary.isWarning)
        #expect(
            summary.message
                == "development shortcuts: dev.sessionTokens on (default while no JWKS is configured), "
                + "dev.appAttestAuthority on (default while no JWKS is configured)")
    }

    @Test(
        "with a JWKS file or URL both shortcuts are off by default: a configured beta is closed",
        arguments: [["jwt.jwksFile": "/etc/stepledger/jwks.json"], ["jwt.jwksUrl": "https://auth.example/jwks.json"]])
    func defaultsWithJWKS(values: [String: String]) throws {
        let configuration = try AppConfiguration(reader: reader(values))
        #expect(configuration.mode == .testPhase)
        #expect(!configuration.acceptsDevelopmentSessionTokens)
        #expect(!configuration.trustsDevelopmentAppAttestAuthority)
        let summary = try #require(configuration.developmentShortcutsSummary)
        #expect(!summary.isWarning)
        #expect(summary.message.contains("dev.sessionTokens off (default while a JWKS is configured)"))
        #expect(
            configuration.developmentTokenWarning
                == "warning: a server with this configuration refuses development session tokens (stepd token): "
                + "dev.sessionTokens is off by default while a JWKS is configured; set dev.sessionTokens to true "
                + "(STEPLEDGER_DEV_SESSION_TOKENS=true) for it to accept them")
        #expect(
            configuration.developmentDeviceWarning
                == "warning: a server with this configuration refuses attestations from the development App Attest CA "
                + "(stepd device): dev.appAttestAuthority is off by default while a JWKS is configured; set "
                + "dev.appAttestAuthority to true (STEPLEDGER_DEV_APP_ATTEST_AUTHORITY=true) for it to accept them")
    }

    @Test("explicit true with a JWKS is the operator's choice in test-phase")
    func explicitOnWithJWKS() throws {
        let configuration = try AppConfiguration(
            reader: reader([
                "jwt.jwksFile": "/k.json", "dev.sessionTokens": "true", "dev.appAttestAuthority": "true",
            ]))
        #expect(configuration.acceptsDevelopmentSessionTokens)
        #expect(configuration.trustsDevelopmentAppAttestAuthority)
        #expect(configuration.developmentTokenWarning == nil)
        #expect(configuration.developmentDeviceWarning == nil)
        #expect(
            configuration.developmentShortcutsSummary?.message
                == "development shortcuts: dev.sessionTokens on, dev.appAttestAuthority on")
    }

    @Test("explicit false without a JWKS: no session token is accepted, and the start-up line warns so")
    func explicitOffWithoutJWKS() throws {
        let configuration = try AppConfiguration(
            reader: reader(["dev.sessionTokens": "false", "dev.appAttestAuthority": "false"]))
        #expect(!configuration.acceptsDevelopmentSessionTokens)
        #expect(!configuration.trustsDevelopmentAppAttestAuthority)
        let summary = try #require(configuration.developmentShortcutsSummary)
        #expect(summary.isWarning)
        #expect(
            summary.message
                == "development shortcuts: dev.sessionTokens off, dev.appAttestAuthority off; no JWKS is configured "
                + "(jwt.jwksFile or jwt.jwksUrl), so no session token is accepted until one is")
        #expect(configuration.developmentTokenWarning?.contains("dev.sessionTokens is false;") == true)
        #expect(configuration.developmentDeviceWarning?.contains("dev.appAttestAuthority is false;") == true)
        // Either one alone: the App Attest shortcut off leaves the tokens on by default.
        let attestOnly = try AppConfiguration(reader: reader(["dev.appAttestAuthority": "false"]))
        #expect(attestOnly.acceptsDevelopmentSessionTokens)
        #expect(!attestOnly.trustsDevelopmentAppAttestAuthority)
        #expect(attestOnly.developmentShortcutsSummary?.isWarning == false)
    }

    @Test(
        "production refuses either shortcut set true, naming it",
        arguments: ["dev.sessionTokens", "dev.appAttestAuthority"])
    func productionRefuses(key: String) {
        var values = Self.production
        values[key] = "true"
        #expect {
            _ = try AppConfiguration(reader: reader(values))
        } throws: { error in
            guard let error = error as? ConfigurationError else { return false }
            return error.key == key
                && error.description
                    == "configuration key '\(key)' is a development shortcut and is refused in production mode"
        }
    }

    @Test("production has both off, by default and when set false, and its tools print no shortcut warning")
    func productionOff() throws {
        for extra in [[:], ["dev.sessionTokens": "false", "dev.appAttestAuthority": "false"]] {
            let configuration = try AppConfiguration(reader: reader(Self.production.merging(extra) { $1 }))
            #expect(!configuration.acceptsDevelopmentSessionTokens)
            #expect(!configuration.trustsDevelopmentAppAttestAuthority)
            #expect(configuration.developmentShortcutsSummary == nil)
            #expect(configuration.developmentTokenWarning == nil)
            #expect(configuration.developmentDeviceWarning == nil)
        }
        // `validateForMode` (what `buildApplication` runs) refuses a value set in code as well.
        var configuration = try AppConfiguration(reader: reader(Self.production))
        configuration.dev.appAttestAuthority = true
        #expect(throws: ConfigurationError.self) { try configuration.validateForMode() }
    }

    @Test("a value that is not a boolean is refused, naming the key", arguments: ["yes", "1", "on"])
    func wrongTypeFromText(value: String) {
        #expect {
            _ = try AppConfiguration(reader: reader(["dev.sessionTokens": value]))
        } throws: { error in
            (error as? ConfigurationError)?.key == "dev.sessionTokens"
        }
    }

    @Test("in a file, a number or a string that is not true or false is refused, naming the key")
    func wrongTypeInFile() throws {
        let number = try loadingError(file: #"{"dev": {"appAttestAuthority": 1}}"#)
        #expect((number as? ConfigurationError)?.key == "dev.appAttestAuthority", "\(String(describing: number))")
        let text = try loadingError(file: #"{"dev": {"sessionTokens": "maybe"}}"#)
        #expect((text as? ConfigurationError)?.key == "dev.sessionTokens", "\(String(describing: text))")
    }

    @Test("an unknown key in the section is refused with the nearest one")
    func unknownKey() throws {
        let error = try #require(
            try loadingError(file: #"{"dev": {"sessionToken": false}}"#) as? ConfigurationSourceError)
        #expect(error.problem == .unknownKey("dev.sessionToken", suggestion: "dev.sessionTokens"))
        let variable = try #require(
            throws: ConfigurationSourceError.self,
            performing: { try ConfigurationSources(environment: ["STEPLEDGER_DEV_SESION_TOKENS": "true"]).load() })
        #expect(
            variable.problem
                == .unknownVariable("STEPLEDGER_DEV_SESION_TOKENS", suggestion: "STEPLEDGER_DEV_SESSION_TOKENS"))
    }

    @Test("the file's booleans and the environment's text are read; the section reads from its own scope")
    func sources() throws {
        let file = try TemporaryConfigFile(#"{"jwt": {"jwksFile": "/k.json"}, "dev": {"sessionTokens": true}}"#)
        defer { file.remove() }
        let configuration = try ConfigurationSources(
            environment: ["STEPLEDGER_DEV_APP_ATTEST_AUTHORITY": "TRUE"], file: file.path
        ).load()
        #expect(configuration.dev.sessionTokens == true)
        #expect(configuration.dev.appAttestAuthority == true)
        #expect(configuration.acceptsDevelopmentSessionTokens)
        let dev = try AppConfiguration.Dev(reader: reader(["sessionTokens": "false", "dev.sessionTokens": "true"]))
        #expect(dev.sessionTokens == false)
        #expect(dev.appAttestAuthority == nil)
    }
}
