# The hook client's fast path, in Perl: what Claude Code or Qwen Code runs for a hook.
#
#     perl _client.pl AGENT EVENT PYTHON < hook-input.json
#
# The same request and answer as _client.py (see its docstring), at a fraction of its
# start: Perl starts in a few milliseconds where Python takes ten or more, and this file
# loads no module at all (no Socket, no POSIX: the socket calls are built in, the address
# is packed here). It only talks to a running recall service. Anything else (no service,
# a socket it cannot open, a platform whose address it does not know) hands the hook, as
# it came, to the Python client (PYTHON _client.py AGENT EVENT), which starts the service
# or fails quietly. Any failure prints nothing and exits 0: memory never stops the agent.

my ($agent, $event, $python) = @ARGV;
exit 0 unless defined $event;
$SIG{ALRM} = sub { exit 0 };    # a wedged service: answer nothing
alarm 1;

my $payload = '';
binmode STDIN;
while (sysread(STDIN, my $chunk, 65536)) { $payload .= $chunk }

my $request = "$agent $event\n";
for my $name (sort keys %ENV) {
    next unless $name =~ /^(?:ASYNCRECALL_|OPENAI_BASE_URL|OPENAI_API_KEY|CLAUDE_CONFIG_DIR)/;
    my $value = $ENV{$name};
    next if $value =~ /[\r\n]/;
    $request .= "$name=$value\n";
}
$request .= "\n" . $payload;

my $home = $ENV{ASYNCRECALL_HOME};
$home = ($ENV{HOME} || (getpwuid($<))[7]) . '/.asyncrecall' unless length($home // '');
my $path = "$home/run/hooks.sock";

# struct sockaddr_un with AF_UNIX (1): a native short family on Linux; a length byte and a
# family byte on the BSDs and macOS. SOCK_STREAM is 1 on both.
my $address;
if ($^O eq 'linux') {
    $address = pack('S', 1) . $path;
} elsif ($^O =~ /^(?:darwin|freebsd|openbsd|netbsd|dragonfly)$/) {
    $address = pack('CC', length($path) + 2, 1) . $path;
}

my $known = defined $address && length($path) < 104;
my $sock;
if ($known && socket($sock, 1, 1, 0) && connect($sock, $address)) {
    binmode $sock;
    my $offset = 0;
    while ($offset < length $request) {
        my $sent = syswrite($sock, $request, length($request) - $offset, $offset);
        exit 0 unless $sent;
        $offset += $sent;
    }
    shutdown($sock, 1);
    my $answer = '';
    while (sysread($sock, my $chunk, 65536)) { $answer .= $chunk }
    binmode STDOUT;
    syswrite(STDOUT, $answer) if length $answer;
    exit 0;
}

# No service answers: the Python client starts one, for the events that start one (all
# but a tool's end), and takes every event where this file does not know the
# platform's socket address.
exit 0 if $known && $event eq 'PostToolUse';
exit 0 unless defined $python && length $python;
(my $client = __FILE__) =~ s/\.pl\z/.py/;
alarm 0;
open(my $pipe, '|-', $python, '-I', '-S', $client, $agent, $event) or exit 0;
binmode $pipe;
print {$pipe} $payload;
close $pipe;
exit 0;
