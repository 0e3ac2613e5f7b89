"""The app's services: plain functions behind the views (the store, jobs and configs), tested without a browser."""
