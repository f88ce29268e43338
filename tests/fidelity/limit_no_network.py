# Network interfaces the program can see (the sandbox has no network: loopback only).
import socket

print(sorted(name for _, name in socket.if_nameindex()))
