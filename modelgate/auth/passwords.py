"""Console user passwords: argon2id via argon2-cffi (slow on purpose, unlike API key hashing)."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

# OWASP's argon2id profile (19 MiB, 2 passes): argon2-cffi's default takes 64 MiB per hash,
# which a gateway process would carry as peak memory after the first login.
_hasher = PasswordHasher(time_cost=2, memory_cost=19 * 1024, parallelism=1)


def hash_password(password: str) -> str:
    return _hasher.hash(password)


def verify_password(password_hash: str, password: str) -> bool:
    try:
        return _hasher.verify(password_hash, password)
    except (VerifyMismatchError, VerificationError, InvalidHashError):
        return False


def needs_rehash(password_hash: str) -> bool:
    return _hasher.check_needs_rehash(password_hash)


# argon2 takes 35-150 ms of CPU (and releases the GIL): run off the event loop, two at a time at most,
# so a spray of logins neither stalls inference on this process nor holds more than 2 x 19 MiB.
_executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="argon2")


async def verify_password_async(password_hash: str, password: str) -> bool:
    return await asyncio.get_running_loop().run_in_executor(_executor, verify_password, password_hash, password)


async def hash_password_async(password: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(_executor, hash_password, password)
