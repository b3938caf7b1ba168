import Configuration
import StepDatabase
import Testing

@testable import StepSettings

/// `STEPLEDGER_*` variables: each must map to a key; the tooling's own variables are left alone; the command line
/// wins over the environment, which wins over the file.
@Suite("Configuration from the environment and the command line")
struct EnvironmentTests {
    @Test("an unknown STEPLEDGER_ variable is refused with the nearest known variable")
    func unknownVariable() throws {
        let sources = ConfigurationSources(environment: ["STEPLEDGER_HTTP_PROT": "9001", "PATH": "/bin"])
        let error = try #require(throws: ConfigurationSourceError.self) { try sources.load() }
        #expect(error.problem == .unknownVariable("STEPLEDGER_HTTP_PROT", suggestion: "STEPLEDGER_HTTP_PORT"))
        #expect(
            error.description
                == "environment: unknown variable STEPLEDGER_HTTP_PROT, no configuration key maps to it "
                + "(did you mean STEPLEDGER_HTTP_PORT?)")
        #expect(throws: ConfigurationSourceError.self) {
            try ConfigurationSources(environment: ["STEPLEDGER_HTP_PORT": "9001"]).load()
        }
    }

    @Test("the test and fuzz tooling's variables are not configuration and are tolerated")
    func toolingVariables() throws {
        let environment = [
            "STEPLEDGER_TEST_POSTGRES_URL": "postgres://localhost/x", "STEPLEDGER_TEST_POSTGRES_BINDIR": "/usr/bin",
            "STEPLEDGER_TEST_POSTGRES_DATA": "/tmp/pg", "STEPLEDGER_FUZZ_VENV": "/tmp/venv",
            "STEPLEDGER_HTTP_PORT": "9001", "HOME": "/root",
        ]
        let configuration = try ConfigurationSources(environment: environment).load()
        #expect(configuration.http.port == 9001)
        #expect(configuration.databaseURL == "./stepledger.sqlite")
    }

    @Test("stepledger-client's variables, exported in the same shell, do not stop stepd")
    func clientVariables() throws {
        let environment = [
            "STEPLEDGER_TOKEN": "eyJ.session.token", "STEPLEDGER_APP_CHECK": "eyJ.app.check",
            "STEPLEDGER_CLIENT_CRASH_AFTER_ANSWER": "0.5", "STEPLEDGER_APP_CHECK_MAX_TOKEN_AGE_SECONDS": "60",
        ]
        let configuration = try ConfigurationSources(environment: environment).load()
        #expect(configuration.appCheck.maxTokenAgeSeconds == 60)
        // Only the exact names are the client's: a misspelt server variable near them is still refused.
        #expect(throws: ConfigurationSourceError.self) {
            try ConfigurationSources(environment: ["STEPLEDGER_TOKENS": "x"]).load()
        }
        #expect(throws: ConfigurationSourceError.self) {
            try ConfigurationSources(environment: ["STEPLEDGER_APP_CHECK_MAX_TOKEN_AGE": "60"]).load()
        }
    }

    @Test("no configuration key's variable is one that belongs to another tool")
    func otherToolsAreDisjoint() {
        let variables = ConfigurationCatalog.app.entries.map(\.environmentVariable)
        #expect(!variables.isEmpty)
        #expect(variables.filter(ConfigurationSources.isOtherTools).isEmpty)
    }

    @Test("every declared key is read from its variable")
    func everyVariable() throws {
        let configuration = try ConfigurationSources(environment: [
            "STEPLEDGER_DATABASE_STATEMENT_TIMEOUT_MS": "1500", "STEPLEDGER_APP_CHECK_MAX_TOKEN_AGE_SECONDS": "60",
            "STEPLEDGER_RETENTION_PRUNE_INTERVAL_SECONDS": "120", "STEPLEDGER_LOG_ANTI_CHEAT_SINK": "off",
        ]).load()
        #expect(configuration.postgres.statementTimeoutMilliseconds == 1500)
        #expect(configuration.appCheck.maxTokenAgeSeconds == 60)
        #expect(configuration.pruneIntervalSeconds == 120)
        #expect(configuration.telemetry.antiCheatSink == "off")
    }

    @Test("command line over environment over file, key by key")
    func precedence() throws {
        let file = try TemporaryConfigFile(
            #"{"http": {"port": 7001, "host": "10.0.0.1", "maxBodyBytes": 4096}, "mode": "test-phase"}"#)
        defer { file.remove() }
        let configuration = try ConfigurationSources(
            commandLine: ["http.port": "9001"],
            environment: ["STEPLEDGER_HTTP_PORT": "8001", "STEPLEDGER_HTTP_HOST": "0.0.0.0"], file: file.path
        ).load()
        #expect(configuration.http.port == 9001)
        #expect(configuration.http.host == "0.0.0.0")
        #expect(configuration.http.maxBodyBytes == 4096)
        let withoutOption = try ConfigurationSources(
            environment: ["STEPLEDGER_HTTP_PORT": "8001"], file: file.path
        ).load()
        #expect(withoutOption.http.port == 8001)
    }

    @Test("a refused value names the variable or the command line it came from")
    func validationNamesSource() throws {
        let fromEnvironment = try #require(throws: ConfigurationError.self) {
            try ConfigurationSources(environment: ["STEPLEDGER_HTTP_PORT": "http"]).load()
        }
        #expect(
            fromEnvironment.description
                == "environment variable STEPLEDGER_HTTP_PORT: configuration key 'http.port' must be an integer, not 'http'"
        )
        // A value with a line break inside is named, not repeated: the error stays one line.
        for (variable, value) in [
            ("STEPLEDGER_HTTP_PORT", "80\n80"), ("STEPLEDGER_WORKER_ENABLED", "tr\rue"),
            ("STEPLEDGER_APP_CHECK_MAX_TOKEN_AGE_SECONDS", "1\t5"),
        ] {
            let refused = try #require(throws: ConfigurationError.self) {
                try ConfigurationSources(environment: [variable: value]).load()
            }
            #expect(!refused.description.contains("\n") && !refused.description.contains("\r"), "\(refused)")
            #expect(refused.description.hasSuffix("(it holds a line break, a tab or another control character)"))
        }
        let fromOption = try #require(throws: ConfigurationError.self) {
            try ConfigurationSources(commandLine: ["mode": "prod"], environment: ["STEPLEDGER_MODE": "production"])
                .load()
        }
        #expect(fromOption.source == "command line")
        #expect(fromOption.key == "mode")
    }

    @Test("a command-line override must name a declared key")
    func unknownOverride() {
        #expect(
            throws: ConfigurationSourceError(
                source: "command line", problem: .unknownKey("http.prot", suggestion: "http.port"))
        ) { try ConfigurationSources(commandLine: ["http.prot": "1"]).load() }
    }
}
