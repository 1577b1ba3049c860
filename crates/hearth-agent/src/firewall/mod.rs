//! The firewall (being built): secret scanning of everything sent to providers.
